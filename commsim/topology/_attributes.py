"""Link and node attributes as users write them: bandwidths and latencies with units.

A graph's edges carry ``bandwidth`` (bytes/s, per direction) and ``latency`` (seconds); either may
be a number in SI units or a string with a unit (``"400Gb/s"``, ``"450GB/s"``, ``"500ns"``), parsed
by :mod:`commsim.units`. Generators accept the same forms for their ``bandwidth=`` and
``latency=`` keywords, so a value means the same everywhere.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from commsim import units
from commsim.errors import ParameterError

__all__ = ["as_bandwidth", "as_latency", "as_share"]


def as_bandwidth(value: Any, what: str = "bandwidth") -> float:
    """Bytes per second from a number (B/s) or a bandwidth string; ``inf`` is a free link.

    Examples:
        >>> as_bandwidth("400Gb/s"), as_bandwidth(25e9), as_bandwidth("inf")
        (50000000000.0, 25000000000.0, inf)
    """
    if isinstance(value, str):
        try:
            per_byte = units.parse_bandwidth_or_inverse(value)
        except units.UnitError as e:
            raise ParameterError(f"{what}: {e}") from None
        return math.inf if per_byte == 0 else 1.0 / per_byte
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(
            f"{what} must be a number of bytes/s or a string like '400Gb/s', got {value!r}"
        )
    v = float(value)
    if not v > 0 or math.isnan(v):
        raise ParameterError(f"{what} must be > 0 bytes/s, got {value!r}")
    return v


def as_latency(value: Any, what: str = "latency") -> float:
    """Seconds from a number or a time string (``"500ns"``); must be finite and ``>= 0``.

    Examples:
        >>> as_latency("500ns"), as_latency(0)
        (5e-07, 0.0)
    """
    if isinstance(value, str):
        try:
            return units.parse_time(value)
        except units.UnitError as e:
            raise ParameterError(f"{what}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(
            f"{what} must be a number of seconds or a string like '1us', got {value!r}"
        )
    v = float(value)
    if not (v >= 0 and math.isfinite(v)):
        raise ParameterError(f"{what} must be finite and >= 0 seconds, got {value!r}")
    return v


def as_share(value: Any, what: str = "share") -> float:
    """A share of a link's rate, a real number in ``(0, 1]`` (a library's efficiency on it).

    Examples:
        >>> as_share(0.824), as_share(1)
        (0.824, 1.0)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise ParameterError(
            f"{what} must be a number in (0, 1] (a share of the rate), got {value!r}"
        )
    return float(value)
