"""Tuner tables as TOML: :func:`write_table` writes what :func:`read_table` reads.

This module knows the file, not the class: it writes a table's plain data
(:meth:`TunerTable.to_dict <commsim.tuner.TunerTable.to_dict>`) and reads back checked fields,
which :meth:`TunerTable.load <commsim.tuner.TunerTable.load>` turns into a table (so the class
imports this module and not the other way round).

The file is for people too: sizes and times carry their readable values as comments, and every
range is one ``[[ranges]]`` table::

    format = "commsim-tuner-table"
    version = 1
    collective = "allreduce"
    nranks = 1024
    model_description = "Hockney alpha=2.00us beta=1/(25.0GB/s) gamma=1/(100GB/s) single-port"
    notes = []

    [model]  # the model's to_dict(): SI units
    name = "hockney"
    alpha_s = 2e-06
    ...

    [[ranges]]
    min_bytes = 1024  # 1KiB
    max_bytes = 2896  # 2.83KiB
    algorithm = "recursive_doubling"
    params = {}
    time_at_min_s = 2.3e-05  # 23.0us
    time_at_max_s = 2.4e-05  # 24.0us
    runner_up = "binomial"  # optional, with the two fields below
    runner_up_params = {}
    margin = 1.9
    protocol = "LL"  # optional: the protocol of a model that chose one per size

Times are seconds; a file written by hand may use unit strings (``min_bytes = "64KiB"``,
``time_at_min_s = "23us"``). Reading checks everything a consumer relies on: the collective and
each algorithm exist, the parameters are the algorithm's, the ranges are contiguous and
increasing; each problem is one :class:`~commsim.ParameterError` line naming the field
(``tuner table t.toml: ranges[2].max_bytes: ...``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from commsim import units
from commsim._collectives import COLLECTIVES
from commsim._toml import key, value, write
from commsim.algorithms import available, info
from commsim.errors import CommsimError, ParameterError
from commsim.models import PROTOCOLS

__all__ = ["FORMAT", "VERSION", "checked_fields", "dumps", "read_table", "write_table"]

FORMAT = "commsim-tuner-table"
VERSION = 1
_TOP = (
    "format",
    "version",
    "collective",
    "nranks",
    "model_description",
    "notes",
    "model",
    "ranges",
)
_RANGE = (
    "min_bytes",
    "max_bytes",
    "algorithm",
    "params",
    "time_at_min_s",
    "time_at_max_s",
    "runner_up",
    "runner_up_params",
    "margin",
    "protocol",
)


# -- writing ----------------------------------------------------------------------------------
def dumps(data: Mapping[str, Any]) -> str:
    """The TOML text of a table's plain data (:meth:`TunerTable.to_dict`)."""
    d = dict(data)
    out = [
        f"# commsim tuner table: {d['collective']} on {d['nranks']} ranks (`commsim tune`).",
        "# Sizes in bytes, times in seconds; comments give the readable values.",
    ]
    d = {"format": FORMAT, "version": VERSION, **d}
    out += [f"{k} = {value(d[k])}" for k in _TOP[:-2]]
    out += ["", "[model]  # the model's to_dict(): SI units"]
    out += [f"{key(k)} = {value(v)}" for k, v in d["model"].items()]
    for r in d["ranges"]:
        out += ["", "[[ranges]]"]
        for k in _RANGE:
            if k not in r:
                continue
            comment = ""
            if k.endswith("_bytes"):
                comment = f"  # {units.format_size(r[k], exact=False)}"
            elif k.startswith("time_"):
                comment = f"  # {units.format_time(r[k])}"
            out.append(f"{k} = {value(r[k])}{comment}")
    return "\n".join(out) + "\n"


def write_table(data: Mapping[str, Any], path: str | Path) -> Path:
    """Write a table's plain data at ``path``; the path. An unwritable path is one line."""
    return write(path, dumps(data), "tuner table")


# -- reading ----------------------------------------------------------------------------------
class _Reader:
    """Errors naming the field: ``tuner table NAME: FIELD: problem``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, field: str, problem: str) -> ParameterError:
        return ParameterError(f"tuner table {self.source}: {field}: {problem}")

    def get(self, d: Mapping[str, Any], key: str, field: str, default: Any = ...) -> Any:
        if key not in d:
            if default is ...:
                raise self.error(field, "missing")
            return default
        return d[key]

    def unknown(self, d: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
        for k in d:
            if k not in known:
                raise self.error(f"{prefix}{k}", f"unknown field (known: {', '.join(known)})")

    def text(self, d: Mapping[str, Any], key: str, field: str, default: Any = ...) -> Any:
        v = self.get(d, key, field, default)
        if v is not default and not isinstance(v, str):
            raise self.error(field, f"must be a string, got {v!r}")
        return v

    def table(self, d: Mapping[str, Any], key: str, field: str, default: Any = ...) -> Any:
        v = self.get(d, key, field, default)
        if v is not default and not isinstance(v, Mapping):
            raise self.error(field, f"must be a table, got {v!r}")
        return v

    def size(self, d: Mapping[str, Any], key: str, field: str) -> int:
        v = self.get(d, key, field)
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise self.error(field, f"must be a size in bytes (an integer or '64KiB'), got {v!r}")
        try:
            return units.parse_size(v)
        except CommsimError as e:
            raise self.error(field, str(e)) from None

    def seconds(self, d: Mapping[str, Any], key: str, field: str) -> float:
        v = self.get(d, key, field)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise self.error(field, f"must be a time in seconds, got {v!r}")
        try:
            t = units.parse_time(v)
        except CommsimError as e:
            raise self.error(field, str(e)) from None
        if not t >= 0 or not math.isfinite(t):
            raise self.error(field, f"must be a finite time >= 0, got {v!r}")
        return float(t)


def read_table(path: str | Path) -> dict[str, Any]:
    """The checked fields (:func:`checked_fields`) of a tuner table :func:`write_table` wrote
    (the module docstring lists the checks)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise ParameterError(f"cannot read tuner table {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ParameterError(f"tuner table {path} is not valid TOML: {e}") from None
    return checked_fields(data, str(path))


def checked_fields(data: Mapping[str, Any], source: str = "<dict>") -> dict[str, Any]:
    """The fields of a table from plain data (a TOML file's, or :meth:`TunerTable.to_dict`'s
    with ``format``), checked: ``collective``, ``nranks``, ``model``, ``model_description``,
    ``notes`` and ``ranges``, each range the arguments of :class:`~commsim.tuner.Range`."""
    r = _Reader(source)
    r.unknown(data, _TOP, "")
    if r.get(data, "format", "format") != FORMAT:
        raise r.error("format", f"must be {FORMAT!r}, got {data['format']!r}")
    if r.get(data, "version", "version") != VERSION:
        raise r.error("version", f"must be {VERSION}, got {data['version']!r}")
    collective = r.text(data, "collective", "collective")
    if collective not in COLLECTIVES:
        raise r.error("collective", f"unknown {collective!r} (one of {', '.join(COLLECTIVES)})")
    nranks = r.get(data, "nranks", "nranks")
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise r.error("nranks", f"must be an integer >= 1, got {nranks!r}")
    model = r.table(data, "model", "[model]")
    description = r.text(data, "model_description", "model_description", "")
    notes = r.get(data, "notes", "notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise r.error("notes", f"must be a list of strings, got {notes!r}")
    items = r.get(data, "ranges", "[[ranges]]")
    if not isinstance(items, list) or not items:
        raise r.error("[[ranges]]", "must be a non-empty array of tables")
    ranges: list[tuple[Any, ...]] = []
    for k, item in enumerate(items):
        rng = _range(r, collective, item, f"ranges[{k}]")
        if ranges and rng[0] != ranges[-1][1] + 1:
            raise r.error(
                f"ranges[{k}].min_bytes",
                f"must be {ranges[-1][1] + 1} (right after ranges[{k - 1}].max_bytes), "
                f"got {rng[0]}",
            )
        ranges.append(rng)
    return {
        "collective": collective,
        "nranks": nranks,
        "model": dict(model),
        "model_description": description,
        "ranges": ranges,
        "notes": tuple(notes),
    }


def _range(r: _Reader, collective: str, item: Any, where: str) -> tuple[Any, ...]:
    """``(min_bytes, max_bytes, algorithm, params, times, runner_up, its params, margin,
    protocol)`` (``None``, ``{}``, ``None`` without a runner-up; ``None`` without a protocol)."""
    if not isinstance(item, Mapping):
        raise r.error(where, f"must be a table, got {item!r}")
    r.unknown(item, _RANGE, f"{where}.")
    lo = r.size(item, "min_bytes", f"{where}.min_bytes")
    hi = r.size(item, "max_bytes", f"{where}.max_bytes")
    if hi < lo:
        raise r.error(f"{where}.max_bytes", f"must be >= min_bytes ({lo}), got {hi}")
    algorithm = _algorithm(r, collective, item, "algorithm", f"{where}.algorithm")
    params = _params(r, collective, algorithm, item, "params", f"{where}.params")
    times = (
        r.seconds(item, "time_at_min_s", f"{where}.time_at_min_s"),
        r.seconds(item, "time_at_max_s", f"{where}.time_at_max_s"),
    )
    protocol = item.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        raise r.error(
            f"{where}.protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}"
        )
    if "runner_up" not in item:
        for k in ("runner_up_params", "margin"):
            if k in item:
                raise r.error(f"{where}.{k}", "given without runner_up")
        return (lo, hi, algorithm, params, times, None, {}, None, protocol)
    runner = _algorithm(r, collective, item, "runner_up", f"{where}.runner_up")
    runner_params = _params(
        r, collective, runner, item, "runner_up_params", f"{where}.runner_up_params"
    )
    margin = r.get(item, "margin", f"{where}.margin")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin > 0:
        raise r.error(f"{where}.margin", f"must be a number > 0, got {margin!r}")
    return (lo, hi, algorithm, params, times, runner, runner_params, float(margin), protocol)


def _algorithm(r: _Reader, collective: str, item: Mapping[str, Any], key: str, field: str) -> str:
    name = r.text(item, key, field)
    if name not in available(collective):
        raise r.error(
            field, f"no {collective} algorithm {name!r} (known: {', '.join(available(collective))})"
        )
    return name


def _params(
    r: _Reader, collective: str, algorithm: str, item: Mapping[str, Any], key: str, field: str
) -> dict[str, Any]:
    params = r.table(item, key, field, {})
    accepted = {"channels": 1, **info(collective, algorithm).params}  # channels: the library's
    for k, v in params.items():
        if k not in accepted:
            raise r.error(
                f"{field}.{k}",
                f"{collective}/{algorithm} has no such parameter "
                f"(accepted: {', '.join(accepted) or 'none'})",
            )
        default = accepted[k]
        if type(v) is not type(default) and not (isinstance(default, str) and isinstance(v, list)):
            raise r.error(
                f"{field}.{k}", f"must be {type(default).__name__} like its default, got {v!r}"
            )
        if isinstance(v, int) and v < 1:  # the registry's numeric parameters are all counts
            raise r.error(f"{field}.{k}", f"must be an integer >= 1, got {v!r}")
    return dict(params)
