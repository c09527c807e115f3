"""Checked inputs for every model: schedules, message sizes and parameters, unit strings accepted.

A model's public methods call these first, so a bad argument is one :class:`ParameterError`
sentence (``nbytes must be ...``) instead of a traceback from deep inside numpy, and the API takes
the unit strings the command line teaches (``nbytes="1MiB"``, ``alpha="2us"``, ``beta="25GB/s"``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from commsim import units
from commsim._ir import Schedule
from commsim.errors import ParameterError

__all__ = [
    "as_inverse_bandwidth",
    "as_links",
    "as_ports",
    "as_schedule",
    "as_sizes",
    "as_time",
]


def as_schedule(schedule: Any) -> Schedule:
    if not isinstance(schedule, Schedule):
        raise ParameterError(
            f"expected a commsim.Schedule (e.g. commsim.build(...)), got {type(schedule).__name__}"
        )
    return schedule


def as_sizes(nbytes: Any) -> tuple[np.ndarray, bool]:
    """Message sizes as every model reads ``nbytes``: ``(sizes, scalar)``.

    ``sizes`` is a 1-D float array of bytes; ``scalar`` says whether ``nbytes`` was one number
    (or one size string), so that a prediction drops its size axis. Accepts a number, a unit
    string (``"1MiB"``, a range ``"1KiB..1GiB"`` of powers of two), or a 1-D sequence of numbers;
    anything else (negative, infinite, empty, 2-D, an unknown unit) is one
    :class:`~commsim.errors.ParameterError` sentence.

    Examples:
        >>> as_sizes("1MiB")
        (array([1048576.]), True)
        >>> sizes, scalar = as_sizes("1KiB..4KiB")
        >>> sizes.tolist(), scalar
        ([1024.0, 2048.0, 4096.0], False)
    """
    if isinstance(nbytes, str):
        try:
            sizes = units.parse_sizes(nbytes)
        except units.UnitError as e:
            raise ParameterError(f"nbytes: {e}") from None
        return np.asarray(sizes, dtype=np.float64), len(sizes) == 1 and ".." not in nbytes
    try:
        arr = np.asarray(nbytes, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(
            f"nbytes must be a number of bytes, a size such as '1MiB', or a 1-D array of them; "
            f"got {nbytes!r:.60}"
        ) from None
    if arr.ndim > 1:
        raise ParameterError(f"nbytes must be a number or a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ParameterError("nbytes is empty: give at least one message size")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ParameterError("nbytes must be finite and >= 0")
    return np.atleast_1d(arr), arr.ndim == 0


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number or a unit string, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ParameterError(f"{name} must be finite and >= 0, got {value!r}")
    return v


def _parsed(name: str, value: Any, parse: Callable[[str], float]) -> float:
    if isinstance(value, str):
        try:
            return parse(value)
        except units.UnitError as e:
            raise ParameterError(f"{name}: {e}") from None
    return _number(name, value)


def as_time(name: str, value: Any) -> float:
    """Seconds from a number or a time string (``"2us"``)."""
    return _parsed(name, value, units.parse_time)


def as_inverse_bandwidth(name: str, value: Any) -> float:
    """Seconds per byte from a number or a bandwidth string (``"25GB/s"``, ``"4e-11s/B"``)."""
    return _parsed(name, value, units.parse_bandwidth_or_inverse)


def as_ports(ports: Any) -> int | str:
    """``"single"``, ``"multi"`` or a port count ``k >= 1`` (``1`` is ``"single"``)."""
    if isinstance(ports, str) and ports.isascii() and ports.isdigit() and len(ports) <= 18:
        ports = int(ports)  # not "²" (isdigit, but int() refuses it) nor 5,000 digits
    if ports in ("single", "multi"):
        return ports
    if isinstance(ports, numbers.Integral) and not isinstance(ports, bool) and ports >= 1:
        return "single" if ports == 1 else int(ports)
    raise ParameterError(
        f"ports must be 'single', 'multi' or a port count >= 1 (k ports share the rank's link), "
        f"got {ports!r}"
    )


def as_links(links: Any) -> int:
    """Independent links per rank: an integer ``>= 1`` (or its digits as a string)."""
    if isinstance(links, str) and links.isascii() and links.isdigit() and len(links) <= 18:
        links = int(links)
    if isinstance(links, numbers.Integral) and not isinstance(links, bool) and links >= 1:
        return int(links)
    raise ParameterError(f"links must be a count of independent links per rank >= 1, got {links!r}")
