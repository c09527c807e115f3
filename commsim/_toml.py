"""TOML keys and values as text: the one writer behind every file commsim writes.

The standard library reads TOML (:mod:`tomllib`) but does not write it, and each of commsim's
files (profiles, tuner tables, fitted clusters) is written line by line, with comments beside the
numbers, so this module formats the pieces and leaves the layout to each file's writer.

:func:`value` writes (TOML 1.0, https://toml.io/en/v1.0.0):

* ``bool`` as ``true``/``false`` (checked before the integers, of which it is one);
* integers (``int``, NumPy's) in decimal;
* floats (``float``, NumPy's) as Python's ``repr`` of the value, the shortest decimal that reads
  back to the same double, so a file round-trips exactly; ``1e-06`` and ``1e+16`` are TOML floats
  as they stand (an exponent may carry a sign and leading zeros); non-finite ones as TOML's
  ``inf``, ``-inf`` and ``nan``;
* strings as basic strings: JSON's escaping (``\\"``, ``\\\\``, ``\\n``, ``\\t``, other control
  characters, DEL and every non-ASCII character as ``\\uXXXX``), which TOML reads the same,
  except that a character beyond the Basic Multilingual Plane becomes ``\\UXXXXXXXX`` (JSON's
  surrogate pair is not a TOML escape);
* dates and times (what :mod:`tomllib` reads a TOML date or time as) in ISO 8601, TOML's form;
* lists and tuples as arrays, mappings as inline tables (keys by :func:`key`).

Anything else (``None``, which TOML cannot express, an object) is a
:class:`~commsim.errors.ParameterError`. :func:`key` writes a key bare when TOML allows
(``A-Za-z0-9_-``) and as a quoted string otherwise.

Examples:
    >>> import tomllib
    >>> v = {"a": [1, 0.1, float("inf")], "b c": True, "s": 'say "hi"\\n'}
    >>> value(v)
    '{a = [1, 0.1, inf], "b c" = true, s = "say \\\\"hi\\\\"\\\\n"}'
    >>> tomllib.loads(f"x = {value(v)}")["x"] == v
    True
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from commsim.errors import ParameterError

__all__ = ["key", "value", "write"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SURROGATES = re.compile(r"\\ud([89ab][0-9a-f]{2})\\ud([c-f][0-9a-f]{2})")


def key(k: str) -> str:
    """A TOML key: bare if it may be (``A-Za-z0-9_-``, not empty), else a quoted string.

    Examples:
        >>> key("alpha_s"), key("link class"), key("")
        ('alpha_s', '"link class"', '""')
    """
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def value(v: Any) -> str:
    """A TOML value (the module docstring lists the types and how each is written).

    Examples:
        >>> value(2e-06), value(float("-inf")), value(3), value(False), value(("x", []))
        ('2e-06', '-inf', '3', 'false', '["x", []]')
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
        return repr(f)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{key(str(k))} = {value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise ParameterError(f"cannot write {v!r} ({type(v).__name__}) as a TOML value")


def write(path: str | os.PathLike[str], text: str, what: str) -> Path:
    """Write ``text`` (a whole TOML file) at ``path``; the path. An unwritable path is one line
    naming ``what`` the file is ("profile", "tuner table")."""
    path = Path(path)
    try:
        path.write_text(text)
    except OSError as e:
        raise ParameterError(f"cannot write {what} {path}: {e.strerror or e}") from None
    return path


def _string(s: str) -> str:
    """A TOML basic string (JSON's escaping, made TOML's where the two differ)."""
    text = json.dumps(s)
    if "\\ud" in text:
        text = _SURROGATES.sub(_astral, text)
    return text


def _astral(m: re.Match[str]) -> str:
    high, low = int("d" + m[1], 16), int("d" + m[2], 16)
    return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08X}"
